# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # How a module reaches the served engine: url and api_key, the options of
    # module_utils/engine_client.py ENGINE_ENDPOINT_ARG_SPEC (engine_health, engine_smoke).
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the engine, for example V(http://127.0.0.1:8000). A trailing C(/) or C(/v1) is ignored.
    type: str
    default: http://127.0.0.1:8000
  api_key:
    description:
      - >-
        API key, sent as C(Authorization: Bearer <key>). Leave empty when the engine runs without keys.
    type: str
"""
