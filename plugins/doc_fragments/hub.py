# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # How a module reaches the Hugging Face Hub: token, token_file and endpoint
    # (module_utils/hub.py hub_client). Every Hub module has them.
    DOCUMENTATION = r"""
options:
  token:
    description:
      - The Hub token. Needed for gated and private repositories.
      - When not given, the module uses E(HF_TOKEN), then the file O(token_file), then E(HF_TOKEN_PATH), then
        C($HF_HOME/token) (C(~/.cache/huggingface/token), where C(hf auth login) writes it); without any, it asks
        anonymously.
    type: str
  token_file:
    description:
      - A file that holds the Hub token, used when neither O(token) nor E(HF_TOKEN) is set.
      - The module fails when this file does not exist or is empty.
    type: path
  endpoint:
    description:
      - The Hub to ask, for example a mirror or a test server. Defaults to E(HF_ENDPOINT), else
        U(https://huggingface.co).
    type: str
"""

    # The repository of the modules whose arguments are module_utils/hub.py HUB_COMMON_ARG_SPEC
    # (with sparkfold.cluster.hub for the rest of it). O(revision) is documented by each module:
    # what it accepts and when it is resolved differ.
    REPO = r"""
options:
  repo_id:
    description:
      - The repository on the Hub, as C(owner/name).
    type: str
    required: true
  repo_type:
    description:
      - The kind of repository.
    type: str
    default: model
    choices: [model, dataset, space]
"""

    # connect_timeout, read_timeout and stall_timeout: module_utils/hub_timeouts.py HUB_TIMEOUT_ARG_SPEC, which
    # every Hub module takes; hub_client applies them to every Hub call, module_utils/hub_download.py to downloads.
    TIMEOUTS = r"""
options:
  connect_timeout:
    description:
      - Seconds to wait for a connection (TCP and TLS) to the Hub, its CDN or a proxy before the module gives up,
        for every call to the Hub.
      - The failure says which host did not answer and how long the module waited, with kind V(timeout).
    type: float
    default: 10
  read_timeout:
    description:
      - Seconds to wait for an answer, or for the next bytes of one, on an open connection to the Hub or its CDN,
        for every call to the Hub. A Hub or proxy that accepts the connection and never answers fails the task
        after this long instead of hanging it.
    type: float
    default: 60
  stall_timeout:
    description:
      - Seconds within which an answer of the Hub, or a file being downloaded, must bring 1 MiB (or the rest of it).
        One slower than that (a Hub, CDN or proxy that trickles bytes), or one that brings nothing for this long, is
        cut off, and the failure names this option.
      - A download cut off is tried again at once from the bytes it has; when the second attempt in a row stalls
        too, the file is given up with kind V(stalled) (or V(timeout) when nothing came).
      - The read timeout of downloads is the lower of this and O(read_timeout).
    type: float
    default: 60
"""
