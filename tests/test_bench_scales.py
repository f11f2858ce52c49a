"""bench.scales: its float16 kernel made from solution 18's source by edits, each still applying as many times as
it says (a change to the solution that moves one fails here, not in the bench); and the alternating rounds it
times by."""

from bench.scales import EDITS, half_package


def test_the_float16_kernel_is_made_from_the_solutions_source(tmp_path):
    package = half_package(tmp_path)
    assert sorted(p.name for p in package.iterdir()) == ["__init__.mojo", *sorted(EDITS)]
    products = (package / "matmul_q8.mojo").read_text()
    assert '"gpt2_matmul_q8h"' in products and "DType.float16" in products and "Float32, ImmutAnyOrigin]" in products
    assert "sp: UnsafePointer[Float32" not in products + (package / "int8_products.mojo").read_text()


def test_alternating_rounds_turn_the_order_and_leave_out_the_warm_up():
    """runtime.bandwidth.alternating_seconds, which bench.scales and the decode split time by: each function once
    a round, the order turned every round, the first round untimed."""
    from runtime.bandwidth import alternating_seconds

    calls = []
    took = alternating_seconds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)
    assert calls == ["b", "a", "a", "b", "b", "a", "a", "b"]
    assert {key: len(times) for key, times in took.items()} == {"a": 3, "b": 3}
