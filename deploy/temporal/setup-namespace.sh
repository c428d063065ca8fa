#!/bin/sh
# One-shot set-up of a Temporal server for lockkeeper (docker-compose service
# temporal-setup, image temporalio/admin-tools): the namespace and the search attributes every
# lockkeeper procedure upserts (lockkeeper/devserver.py SEARCH_ATTRIBUTES). Idempotent: safe
# to run on every `docker compose up`.
#   TEMPORAL_ADDRESS   frontend host:port (default temporal:7233)
#   TEMPORAL_NAMESPACE namespace (default default)
#   RETENTION          workflow history retention (default 30d: audits of approvals)
set -eu
: "${TEMPORAL_ADDRESS:=temporal:7233}"
: "${TEMPORAL_NAMESPACE:=default}"
: "${RETENTION:=30d}"
export TEMPORAL_ADDRESS

echo "waiting for Temporal at ${TEMPORAL_ADDRESS}"
i=0
until temporal operator cluster health >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -ge 60 ]; then echo "Temporal not healthy after 120 s" >&2; exit 1; fi
  sleep 2
done

if temporal operator namespace describe --namespace "${TEMPORAL_NAMESPACE}" >/dev/null 2>&1; then
  echo "namespace ${TEMPORAL_NAMESPACE} exists"
else
  temporal operator namespace create --namespace "${TEMPORAL_NAMESPACE}" --retention "${RETENTION}"
fi

existing="$(temporal operator search-attribute list --namespace "${TEMPORAL_NAMESPACE}" 2>/dev/null || true)"
for pair in LockkeeperCluster:Keyword LockkeeperProcedure:Keyword LockkeeperStatus:Keyword LockkeeperPools:KeywordList; do
  name="${pair%%:*}"
  type="${pair#*:}"
  if printf '%s\n' "${existing}" | grep -qw "${name}"; then
    echo "search attribute ${name} exists"
  else
    temporal operator search-attribute create --namespace "${TEMPORAL_NAMESPACE}" --name "${name}" --type "${type}"
  fi
done
echo "Temporal set up for lockkeeper: namespace ${TEMPORAL_NAMESPACE}"
