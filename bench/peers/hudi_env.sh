#!/usr/bin/env bash
# Creates the environment bench/upsert.py runs Apache Hudi in: Hudi 1.2.0 on PySpark 3.5 (its own
# virtualenv; flowledger's .venv has PySpark 4, which the Hudi 1.2 Spark bundle does not support)
# with s3a (hadoop-aws 3.3.4, the AWS SDK bundle it was built against). Jars come from Maven
# Central through `mvn dependency:copy` and stay outside the repository.
#
#   bash bench/peers/hudi_env.sh            # into $HUDI_PEER_DIR (default /tmp/hudi-peer)
#
# Needs python3 (3.9-3.11 for PySpark 3.5), Java 17 and mvn. Safe to rerun: what exists is kept.
set -euo pipefail

DIR=${HUDI_PEER_DIR:-/tmp/hudi-peer}
PYTHON=${PYTHON:-python3}
PYSPARK=${PYSPARK_VERSION:-3.5.9}
ARTIFACTS=(
  org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0
  org.apache.hadoop:hadoop-aws:3.3.4
  com.amazonaws:aws-java-sdk-bundle:1.12.262
)

for tool in "$PYTHON" java mvn; do
  command -v "$tool" >/dev/null || { echo "hudi_env: $tool is not on PATH" >&2; exit 1; }
done

mkdir -p "$DIR/jars"
if [ ! -x "$DIR/venv/bin/python" ]; then
  "$PYTHON" -m venv "$DIR/venv"
fi
"$DIR/venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$PYSPARK')" \
  2>/dev/null || "$DIR/venv/bin/pip" install -q "pyspark==$PYSPARK"

for a in "${ARTIFACTS[@]}"; do
  IFS=: read -r _group artifact version <<<"$a"
  jar="$DIR/jars/$artifact-$version.jar"
  if [ ! -f "$jar" ]; then
    mvn -B -q -ntp -Dstyle.color=never dependency:copy -Dartifact="$a" -DoutputDirectory="$DIR/jars"
  fi
done

echo "Hudi environment ready in $DIR (pyspark $PYSPARK; jars: $(ls "$DIR/jars" | tr '\n' ' '))"
