"""The production-shaped rehearsal, once: inventories/example filled for an account made in moto and deployed end to end.

tests/harness/example_rehearsal.py says what it creates, which runs it makes and which stand-ins it uses. Prints
`name: value` lines:
  example_failed_runs                 runs that failed, of preflight, infrastructure.yml --check --diff, infrastructure.yml,
                                      the first model release, deploy.yml --check --diff, deploy.yml, deploy.yml again,
                                      a model release, rollback_models.yml, a second deploy and rollback_traffic.yml (target 0)
  example_noop_changed                tasks the second deploy.yml reported changed (target 0)
  example_check_predicted             1 when the check runs' plans name every task their real runs changed and the check
                                      runs wrote nothing (moto's request recorder), else 0 (target 1)
  example_edits_beyond_placeholders   lines of the filled copy that differ from inventories/example other than by a
                                      placeholder's replacement (target 0)
  example_seconds                     wall time of the whole rehearsal, reported
Exits 1 only when it cannot measure (the report of the runs goes to stderr).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / ".build" / "collections"))

from tests.harness.example_rehearsal import Rehearsal
from tests.harness.figures import report


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="example-deploy-") as tmp:
        try:
            rehearsal = Rehearsal(Path(tmp)).run()
        except Exception as err:  # the stand-ins could not be set up: nothing measured
            print(f"cannot measure: {type(err).__name__}: {err}", file=sys.stderr)
            return 1
    print(rehearsal.report(), file=sys.stderr)
    return report(rehearsal.figures())


if __name__ == "__main__":
    raise SystemExit(main())
