"""Defaults of :class:`memray.MemoryConfig` that depend on where memray runs."""

from __future__ import annotations

import os

import pytest

import memray


def test_a_memray_starts_a_host_per_cpu_of_its_ray_up_to_four_unless_told() -> None:
    assert [memray.MemoryConfig(num_cpus=n).hosts for n in (1, 2, 3, 4, 16)] == [1, 2, 3, 4, 4]
    assert memray.MemoryConfig().hosts == max(1, min(4, os.cpu_count() or 1))  # a local Ray of this machine
    assert memray.MemoryConfig(address="127.0.0.1:6379").hosts == 4  # a cluster's CPUs are not known here
    assert memray.MemoryConfig(num_cpus=1, hosts=6).hosts == 6
    assert memray.MemoryConfig.model_validate({"num_cpus": 2}).hosts == 2


def test_an_invalid_option_the_default_hosts_read_is_the_only_mistake_named() -> None:
    with pytest.raises(memray.ValidationError) as err:
        memray.MemoryConfig(num_cpus="two")  # type: ignore[arg-type]
    assert err.value.field == "num_cpus" and "also invalid" not in str(err.value)
