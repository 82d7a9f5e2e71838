"""Dashboard URLs of the billing catalog, the model prices and the provider aliases.
Pages are GETs (query parameters select an edit or confirm state); every write is a POST
to its own URL."""

from django.urls import path

from billing.views import aliases, catalog, prices

app_name = "billing"
urlpatterns = [
    path("catalog/", catalog.catalog, name="catalog"),
    path("catalog/create/", catalog.catalog_create, name="catalog-create"),
    path("catalog/<int:entry_id>/update/", catalog.catalog_update, name="catalog-update"),
    path("catalog/<int:entry_id>/delete/", catalog.catalog_delete, name="catalog-delete"),
    path("prices/", prices.prices, name="prices"),
    path("prices/save/", prices.price_save, name="price-save"),
    path("prices/<int:price_id>/delete/", prices.price_delete, name="price-delete"),
    path(
        "prices/<int:price_id>/confirm-free/",
        prices.price_confirm_free,
        name="price-confirm-free",
    ),
    path("prices/import/", prices.price_import, name="price-import"),
    path("aliases/", aliases.aliases, name="aliases"),
    path("aliases/save/", aliases.alias_save, name="alias-save"),
    path("aliases/<str:alias>/delete/", aliases.alias_delete, name="alias-delete"),
]
