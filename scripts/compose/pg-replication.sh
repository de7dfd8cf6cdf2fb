#!/bin/sh
# docker-compose.yml's pg-primary: let the replica connect for streaming replication (the image's
# POSTGRES_HOST_AUTH_METHOD=trust rule covers databases, not replication connections).
echo "host replication all all trust" >> "$PGDATA/pg_hba.conf"
