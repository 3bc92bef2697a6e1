from django.urls import path

from problems import views

app_name = "problems"

urlpatterns = [
    path("calculators/", views.calculators_index, name="calculators"),
    path("calculators/<slug:slug>/", views.calculator_detail, name="calculator"),
]
