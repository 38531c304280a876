# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The C(attributes) every module of the collection declares (check and diff mode), as community.docker does.
A module that supports both fully extends C(inferops.triton_ecs.attributes.full) and adds only its C(details); a module
that only reads extends C(inferops.triton_ecs.attributes.info_module) (as community.general's info modules do); the
others extend C(inferops.triton_ecs.attributes) and say their own C(support)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and report what it would change (C(changed)) without writing.
  diff_mode:
    description: Returns C(diff) with what changed (or, in check mode, would change), as C(before) and C(after).
"""

    FULL = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and report what it would change (C(changed)) without writing.
    support: full
  diff_mode:
    description: Returns C(diff) with what changed (or, in check mode, would change), as C(before) and C(after).
    support: full
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and report what it would change (C(changed)) without writing.
    support: full
    details:
      - Only reads, so it runs the same in check mode.
  diff_mode:
    description: Returns C(diff) with what changed (or, in check mode, would change), as C(before) and C(after).
    support: N/A
    details:
      - Nothing is written, so there is nothing to diff.
"""
