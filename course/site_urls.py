from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from course import account, drills_views, practice_views, views

app_name = "course"

urlpatterns = [
    path("", views.home, name="home"),
    re_path(r"^pages/(?P<number>\d+)/$", views.page_detail, name="page"),
    re_path(r"^pages/(?P<number>\d+)/progress$", views.progress_update, name="progress"),
    path("problems/<int:number>/", views.problem_redirect, name="problem"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/login/", views.login_view, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/", account.account, name="account"),
    path("account/keys/<int:key_id>/revoke", account.account_key_revoke,
         name="account_key_revoke"),
    path("practice/", practice_views.practice_index, name="practice"),
    path("practice/drills/", drills_views.drills_index, name="drills"),
    path("practice/drills/next/", drills_views.drill_next, name="drill_next"),
    path("practice/drills/round/", drills_views.drill_round, name="drill_round"),
    path("practice/drills/round/start/", drills_views.drill_round_start,
         name="drill_round_start"),
    path("practice/drills/history/", drills_views.drill_history, name="drill_history"),
    path("practice/drills/<slug:kind>/<int:seed>/", drills_views.drill_question, name="drill"),
    path("practice/random/", practice_views.practice_random, name="practice_random"),
    path("practice/review/<int:page>/", practice_views.practice_review, name="practice_review"),
    path("practice/<int:number>/", practice_views.practice_interview,
         name="practice_interview"),
    path("practice/<int:number>/history/", practice_views.practice_history,
         name="practice_history"),
    path("practice/attempts/<uuid:uid>/", practice_views.practice_attempt,
         name="practice_attempt"),
    path("numbers/", views.numbers, name="numbers"),
]
