#!/bin/sh
# One-shot schema set-up of Temporal's PostgreSQL databases (docker-compose service
# temporal-schema, image temporalio/admin-tools). Idempotent: `create` tolerates an existing
# database, setup-schema -v 0.0 only creates the version table, update-schema applies what is
# missing, so upgrading the Temporal image tag upgrades the schema on the next `up`.
set -eu
: "${POSTGRES_SEEDS:=postgresql}"
: "${DB_PORT:=5432}"
: "${POSTGRES_USER:=temporal}"
export SQL_PASSWORD="${POSTGRES_PWD:?POSTGRES_PWD is required}"

until nc -z -w 2 "${POSTGRES_SEEDS}" "${DB_PORT}"; do sleep 1; done

for db in temporal temporal_visibility; do
  case "${db}" in
    temporal) dir=/etc/temporal/schema/postgresql/v12/temporal/versioned ;;
    *) dir=/etc/temporal/schema/postgresql/v12/visibility/versioned ;;
  esac
  tool="temporal-sql-tool --plugin postgres12 --ep ${POSTGRES_SEEDS} -p ${DB_PORT} -u ${POSTGRES_USER} --db ${db}"
  $tool create || echo "database ${db} exists"
  $tool setup-schema -v 0.0
  $tool update-schema -d "${dir}"
done
echo "Temporal schema ready"
