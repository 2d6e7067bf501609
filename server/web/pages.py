"""The dashboard: server-rendered page shells (Jinja2) whose data the browser reads from the same `/v1`
API the CLI uses, with the token the reader typed in (kept in the tab's sessionStorage).

The pages carry no job data themselves, so they need no authentication: without a token the browser
shows nothing but the token form. Each job kind's view is a script of its own in the kind's folder
(`padbench/kinds/<kind>/view.js`, named by its record), served at `/kinds/<kind>.js` and loaded by every page
for the registered kinds that have one. A Content-Security-Policy of `'self'` keeps
every page from loading anything from elsewhere (the charting library is served from `static/vendor/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

import padbench
from padbench.contract.api import API_PREFIX
from padbench.contract.kinds import JOB_KINDS
from padbench.kinds.record import kind_spec, kind_specs
from padbench.server.api.routes.compare import COMPARED_IDS
from padbench.server.web.docs import docs_router

HERE = Path(__file__).parent
CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'"

templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, **context: object) -> HTMLResponse:
    # Paths, not absolute URLs: behind a TLS-terminating proxy an http:// URL would be blocked as mixed content.
    root = request.scope.get("root_path", "")
    response = templates.TemplateResponse(request, template, {
        "api": root + API_PREFIX, "root": root, "static": root + "/static", "version": padbench.__version__,
        "kinds": kind_scripts(), **context})
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["Cache-Control"] = "no-store"
    return response


def kind_scripts() -> list[str]:
    """The registered kinds the dashboard has a view for, in the order they were registered."""
    return [kind.name for kind in kind_specs() if kind.view is not None]


@router.get("/kinds/{kind}.js")
def kind_script(kind: Annotated[str, PathParam(max_length=64)]) -> FileResponse:
    """A kind's dashboard view, from its folder; 404 for a kind that is not registered or has none."""
    path = kind_spec(kind).view_path() if kind in JOB_KINDS else None
    if path is None or not path.is_file():
        raise HTTPException(status_code=404, detail=f"no dashboard view for kind {kind!r}")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@router.get("/", response_class=HTMLResponse)
def job_list(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", title="jobs")


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: Annotated[int, PathParam(ge=1, le=2**63 - 1)]) -> HTMLResponse:
    return _page(request, "job.html", title=f"job {job_id}", job_id=job_id)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, ids: Annotated[str, Query(pattern=COMPARED_IDS, max_length=100)]) -> HTMLResponse:
    """`/compare?ids=3,4`: two to eight jobs side by side (the first is the baseline of every ratio)."""
    return _page(request, "compare.html", title=f"compare {ids.replace(',', ', ')}", ids=ids)


@router.get("/history", response_class=HTMLResponse)
def job_history_page(request: Request, job: Annotated[int, Query(ge=1, le=2**63 - 1)]) -> HTMLResponse:
    """`/history?job=3`: the figure over time of each of the job's rows (`GET /v1/history?job=3`)."""
    return _page(request, "history.html", title=f"history of job {job}", job_id=job)


@router.get("/history/{fingerprint}", response_class=HTMLResponse)
def history_page(request: Request,
                 fingerprint: Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$")]) -> HTMLResponse:
    """`/history/FINGERPRINT`: one row's figure over time (`GET /v1/history/FINGERPRINT`)."""
    return _page(request, "history.html", title=f"history of {fingerprint}", fingerprint=fingerprint)


def install_web(app: FastAPI) -> None:
    """Dashboard pages at `/`, `/jobs/{id}`, `/compare`, `/history`; static files and vendored libraries at
    `/static`."""
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(router)
    app.include_router(docs_router(app))
