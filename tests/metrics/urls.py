from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.urls import path

from jobqueue.metrics import views

urlpatterns = [
    path("admin/", admin.site.urls),  # staff_member_required sends others to its login
    path("metrics/jobs", views.metrics),
    path("protected/metrics/jobs", staff_member_required(views.metrics)),
]
