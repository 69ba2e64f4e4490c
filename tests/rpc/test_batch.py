import asyncio

from memray.rpc.batch import Coalescer


def test_concurrent_requests_share_one_call_and_keep_their_answers():
    calls: list[list[int]] = []

    async def fetch(requests: list[int]) -> list[int]:
        calls.append(list(requests))
        await asyncio.sleep(0)
        return [r * 10 for r in requests]

    async def main() -> list[int]:
        batch = Coalescer(fetch)
        return list(await asyncio.gather(*(batch.get(i) for i in range(100))))

    assert asyncio.run(main()) == [i * 10 for i in range(100)]
    assert len(calls) == 1 and sorted(calls[0]) == list(range(100))


def test_a_failed_call_fails_its_batch_only():
    async def fetch(requests: list[int]) -> list[int]:
        if 13 in requests:
            raise RuntimeError("boom")
        return requests

    async def main() -> None:
        batch = Coalescer(fetch, max_batch=2)
        results = await asyncio.gather(*(batch.get(i) for i in (12, 13, 14, 15)), return_exceptions=True)
        assert isinstance(results[0], RuntimeError) and isinstance(results[1], RuntimeError)
        assert results[2:] == [14, 15]
        assert await batch.get(1) == 1  # still usable

    asyncio.run(main())


def test_weighted_batches_stay_under_the_limit_but_take_at_least_one():
    sizes: list[int] = []

    async def fetch(requests: list[list[int]]) -> list[int]:
        sizes.append(sum(len(r) for r in requests))
        return [len(r) for r in requests]

    async def main() -> list[int]:
        batch: Coalescer[list[int], int] = Coalescer(fetch, max_batch=5, weight=len)
        return list(await asyncio.gather(*(batch.get([0] * n) for n in (3, 2, 4, 9, 1))))

    assert asyncio.run(main()) == [3, 2, 4, 9, 1]
    assert sizes == [5, 4, 9, 1]
