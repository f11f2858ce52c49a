"""bench.scales makes its float16 kernel from solution 18's source by edits: each still applies, as many times as
it says (a change to the solution that moves one fails here, not in the bench)."""

from bench.scales import EDITS, half_package


def test_the_float16_kernel_is_made_from_the_solutions_source(tmp_path):
    package = half_package(tmp_path)
    assert sorted(p.name for p in package.iterdir()) == ["__init__.mojo", *sorted(EDITS)]
    products = (package / "matmul_q8.mojo").read_text()
    assert '"gpt2_matmul_q8h"' in products and "DType.float16" in products and "Float32, ImmutAnyOrigin]" in products
    assert "sp: UnsafePointer[Float32" not in products + (package / "int8_products.mojo").read_text()
