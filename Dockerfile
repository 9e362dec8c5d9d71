# phasewatch: slim runtime image, non-root, health-checked.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN useradd --system --uid 10001 --home-dir /var/lib/phasewatch --create-home phasewatch
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER phasewatch
WORKDIR /var/lib/phasewatch
ENV PHASEWATCH_STORAGE__PATH=/var/lib/phasewatch/phasewatch.db
EXPOSE 8321
# Inside a container the service must listen beyond loopback; publish the port on the
# host's 127.0.0.1 (as docker-compose.yml does) unless you mean to expose it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8321/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["phasewatch"]
CMD ["serve", "--config", "/etc/phasewatch/phasewatch.yaml", "--host", "0.0.0.0", "--port", "8321"]
