#!/usr/bin/env bash
# Refresh the browser libraries the server ships (server/web/static/vendor/): Chart.js for the dashboard,
# Swagger UI and ReDoc for /docs and /redoc. They are committed, so the server never loads anything from
# the internet; this script fetches the pinned versions from the npm registry (`npm pack`) and copies the
# built files and their licences. Change a version here, run it, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
CHARTJS=chart.js@4.5.1
SWAGGER=swagger-ui-dist@5.30.2
REDOC=redoc@2.5.1
vendor=server/web/static/vendor
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unpack() {  # unpack PACKAGE@VERSION into $work/NAME and echo that folder
  local folder="$work/${1%@*}"
  mkdir -p "$folder"
  (cd "$work" && npm pack --silent "$1" | xargs -I{} tar xzf {} -C "$folder")
  echo "$folder/package"
}
chartjs="$(unpack "$CHARTJS")"
swagger="$(unpack "$SWAGGER")"
redoc="$(unpack "$REDOC")"
rm -rf "$vendor" && mkdir -p "$vendor/chartjs" "$vendor/swagger-ui" "$vendor/redoc"
cp "$chartjs/dist/chart.umd.min.js" "$chartjs/LICENSE.md" "$vendor/chartjs/"
cp "$swagger"/{swagger-ui-bundle.js,swagger-ui-bundle.js.LICENSE.txt,swagger-ui.css,favicon-32x32.png,LICENSE,NOTICE} \
  "$vendor/swagger-ui/"
cp "$redoc"/bundles/{redoc.standalone.js,redoc.standalone.js.LICENSE.txt} "$redoc/LICENSE" "$vendor/redoc/"
printf '%s\n' "# Vendored browser libraries (written by scripts/vendor_web_assets.sh; do not edit by hand)" \
  "" "- $CHARTJS (MIT): chartjs/" "- $SWAGGER (Apache-2.0): swagger-ui/" "- $REDOC (MIT): redoc/" \
  > "$vendor/VERSIONS.md"
echo "vendored $CHARTJS, $SWAGGER, $REDOC into $vendor"
