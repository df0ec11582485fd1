# Switchboard in a container: every channel SDK is installed at build time, none at run time.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY channels ./channels
COPY agent ./agent
COPY workspace-template ./workspace-template
RUN python -m venv /opt/switchboard \
 && /opt/switchboard/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/switchboard/bin/pip install --no-cache-dir ".[browser]"

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 switchboard
# web_fetch renders pages that need JavaScript with Debian's Chromium (tools.web.browser);
# nothing downloads a browser at run time. Without this block pages are read as served.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/switchboard /opt/switchboard
ENV PATH=/opt/switchboard/bin:$PATH \
    SWITCHBOARD_HOME=/data \
    PYTHONUNBUFFERED=1
RUN mkdir /data && chown switchboard /data
USER switchboard
VOLUME ["/data"]
EXPOSE 8787
ENTRYPOINT ["switchboard"]
CMD ["run"]
