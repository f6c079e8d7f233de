from django.contrib import admin
from django.urls import path
from shop.views import signup

urlpatterns = [path("admin/", admin.site.urls), path("signup/", signup, name="signup")]
