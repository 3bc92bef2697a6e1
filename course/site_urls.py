from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from course import account, views
from course.forms import LoginForm

app_name = "course"

urlpatterns = [
    path("", views.home, name="home"),
    re_path(r"^pages/(?P<number>\d+)/$", views.page_detail, name="page"),
    re_path(r"^pages/(?P<number>\d+)/progress$", views.progress_update, name="progress"),
    path("problems/<int:number>/", views.problem_redirect, name="problem"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/login/",
         auth_views.LoginView.as_view(authentication_form=LoginForm,
                                      redirect_authenticated_user=True),
         name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/", account.account, name="account"),
    path("account/keys/<int:key_id>/revoke", account.account_key_revoke,
         name="account_key_revoke"),
]
