"""Top-level URLs: web pages, accounts, the REST API, its schema and docs, the Django admin and the favicon."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from portal.accounts.views import GangwayLoginView, profile, token_revoke
from portal.metrics import metrics

urlpatterns = [
    path("", include("portal.web.urls")),
    path("accounts/login/", GangwayLoginView.as_view(), name="login"),
    path("accounts/profile/", profile, name="profile"),
    path("accounts/tokens/<str:token_key>/revoke/", token_revoke, name="token-revoke"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
]
