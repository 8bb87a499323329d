# The operator image: a slim Python with the package and exactly the locked runtime
# dependencies (requirements/runtime.txt, hash-checked), running as a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /opt/sharekeeper
COPY requirements/runtime.txt requirements/
RUN /opt/sharekeeper/bin/pip install --no-cache-dir --require-hashes -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN /opt/sharekeeper/bin/pip install --no-cache-dir --no-deps --no-build-isolation .

FROM python:3.11-slim
COPY --from=build /opt/sharekeeper /opt/sharekeeper
USER 65532:65532
ENV PATH=/opt/sharekeeper/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT ["sharekeeper"]
CMD ["run"]
