# Switchboard in a container: every channel SDK is installed at build time, none at run time.
# Versions are pinned by constraints.txt (`make constraints` regenerates it).
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY gateway ./gateway
COPY channels ./channels
COPY agent ./agent
COPY workspace-template ./workspace-template
RUN python -m venv /opt/switchboard \
 && /opt/switchboard/bin/pip install --no-cache-dir --constraint constraints.txt ".[browser,matrix]"

FROM python:3.11-slim-bookworm
# bubblewrap: the exec tool's sandbox (see compose.yaml for the container options it needs).
# Chromium: web_fetch renders pages that need JavaScript (tools.web.browser); nothing
# downloads a browser at run time. libatomic1 and libstdc++6: what `ldd` finds the node
# binary bundled with Playwright (its driver) linked against; without libatomic1 the driver
# cannot start and no page renders. Tesseract: scans read by OCR for a model that sees no
# images (tools.documents.ocr; English; add tesseract-ocr-<lang> for more).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap chromium fonts-liberation \
    libatomic1 libstdc++6 tesseract-ocr \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 switchboard \
 && mkdir /data && chown switchboard /data
COPY --from=build /opt/switchboard /opt/switchboard
ENV PATH=/opt/switchboard/bin:$PATH \
    SWITCHBOARD_HOME=/data \
    PYTHONUNBUFFERED=1
USER switchboard
VOLUME ["/data"]
EXPOSE 8787
# Liveness: the process and its store answer (/healthz needs no token). Without the web
# server (SWITCHBOARD_WEB__ENABLED=false) run the container with --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SWITCHBOARD_WEB__PORT', '8787'), timeout=4)"]
ENTRYPOINT ["switchboard"]
CMD ["run"]
