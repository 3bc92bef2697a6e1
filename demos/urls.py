from django.urls import path

from demos import views

app_name = "demos"

urlpatterns = [
    path("runs/<uuid:run_id>", views.run_detail, name="run_detail"),
    path("runs/<uuid:run_id>/cancel", views.run_cancel, name="run_cancel"),
    path("runs/<uuid:run_id>/events", views.run_events, name="run_events"),
    path("hardware", views.hardware_latest, name="hardware_latest"),
    path("hardware/measure", views.hardware_measure, name="hardware_measure"),
    path("runs/<uuid:run_id>/files/<str:name>", views.run_file, name="run_file"),
    path("<slug:slug>/", views.demo_page, name="demo_page"),
    path("<slug:slug>/runs", views.run_create, name="run_create"),
]
