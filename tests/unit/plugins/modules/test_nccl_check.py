# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster.nccl_check: fake libraries with and without the patch's marker."""

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import nccl_check

from tests.unit.module_runner import module_runner

ELF = b'\x7fELF\x02\x01\x01' + b'\0' * 57


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, nccl_check.main)


def library(tmp_path, *parts):
    path = tmp_path / 'libnccl.so.2.30.7'
    path.write_bytes(ELF + b''.join(parts))
    return str(path)


def test_a_patched_library_passes_with_its_counts(run, tmp_path, monkeypatch):
    # The marker straddles a chunk boundary once: it is still counted, and only once.
    monkeypatch.setattr(nccl_check, 'CHUNK', 64)
    path = library(tmp_path, b'x' * 50, b'NCCL_SWITCHLESS_RING_ONLY', b'\0' * 100, b'SWITCHLESS_RING_ONLY\0')
    kind, result, _w = run({'path': path, 'markers': ['SWITCHLESS_RING_ONLY']})
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['counts'] == {'SWITCHLESS_RING_ONLY': 2}


def test_a_stock_library_fails_with_what_to_install(run, tmp_path):
    path = library(tmp_path, b'NCCL_ALGO\0NCCL_IB_HCA\0')
    kind, result, _w = run({'path': path, 'markers': ['SWITCHLESS_RING_ONLY'],
                            'install_hint': 'NCCL 2.30.7 + sparkring nccl-2.30.7-switchless-cycle.patch'})
    assert kind == 'fail'
    assert result['msg'] == (f'NCCL library {path} lacks SWITCHLESS_RING_ONLY: it is not the patched NCCL this '
                             'fabric needs (a stock NCCL ignores the setting and fails); install: NCCL 2.30.7 '
                             '+ sparkring nccl-2.30.7-switchless-cycle.patch')


def test_missing_file_and_non_elf_are_refused(run, tmp_path):
    kind, result, _w = run({'path': str(tmp_path / 'nope.so'), 'markers': ['X']})
    assert kind == 'fail' and 'does not exist' in result['msg']
    text = tmp_path / 'libnccl.so'
    text.write_bytes(b'SWITCHLESS_RING_ONLY')
    kind, result, _w = run({'path': str(text), 'markers': ['SWITCHLESS_RING_ONLY']})
    assert kind == 'fail' and 'no ELF header' in result['msg']
