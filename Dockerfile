# The spanguard worker image (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streams ./streams
COPY examples ./examples
RUN pip install --no-cache-dir .
ENV SPANGUARD_WEB_HOST=0.0.0.0 \
    SPANGUARD_DATA_DIR=/data
VOLUME /data
EXPOSE 6066
ENTRYPOINT ["spanguard"]
CMD ["worker"]
