"""`/docs` (Swagger UI) and `/redoc` served with the server's own copies of their assets, so the API
reference renders on a machine without internet access (FastAPI's defaults load them from a CDN)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse

VENDOR = "/static/vendor"


def docs_router(app: FastAPI) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    title = f"{app.title} API"
    openapi_url = app.openapi_url or "/openapi.json"

    @router.get("/docs")
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=title, oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
        )

    @router.get("/docs/oauth2-redirect")
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @router.get("/redoc")
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=title, redoc_js_url=f"{VENDOR}/redoc/redoc.standalone.js",
                              redoc_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png", with_google_fonts=False)

    return router
