"""Dashboard URLs."""

from django.urls import path

from ladder import views

app_name = "ladder"
urlpatterns = [
    path("", views.overview, name="overview"),
]
