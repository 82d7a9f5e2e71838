"""Dashboard URLs of the billing catalog and the model prices. Pages are GETs (query
parameters select an edit or confirm state); every write is a POST to its own URL."""

from django.urls import path

from billing import alias_views, views

app_name = "billing"
urlpatterns = [
    path("catalog/", views.catalog, name="catalog"),
    path("catalog/create/", views.catalog_create, name="catalog-create"),
    path("catalog/<int:entry_id>/update/", views.catalog_update, name="catalog-update"),
    path("catalog/<int:entry_id>/delete/", views.catalog_delete, name="catalog-delete"),
    path("prices/", views.prices, name="prices"),
    path("prices/save/", views.price_save, name="price-save"),
    path("prices/<int:price_id>/delete/", views.price_delete, name="price-delete"),
    path(
        "prices/<int:price_id>/confirm-free/",
        views.price_confirm_free,
        name="price-confirm-free",
    ),
    path("prices/import/", views.price_import, name="price-import"),
    path("aliases/", alias_views.aliases, name="aliases"),
    path("aliases/save/", alias_views.alias_save, name="alias-save"),
    path("aliases/<str:alias>/delete/", alias_views.alias_delete, name="alias-delete"),
]
