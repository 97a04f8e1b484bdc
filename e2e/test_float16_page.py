"""float16 in the page: SwiftShader's adapter has no shader-f16, so asking for a float16 webgpu
tensor is a TypeError naming the adapter and the feature, and float32 work goes on."""
from e2e.conftest import wait_for


def test_float16_is_refused_by_name_where_the_adapter_lacks_shader_f16(page, open_playground):
    open_playground()
    page.fill("[data-testid=code]", "import webgrad as wg\n"
                                    "try:\n"
                                    "    wg.ones(3, device='webgpu').half()\n"
                                    "except TypeError as e:\n"
                                    "    print('refused:', e)\n"
                                    "print('float32 still:', (wg.ones(3, device='webgpu') * 2).sum().item())\n")
    page.click("[data-testid=run-code]")
    wait_for(page, "/float32 still|Error/.test(document.querySelector('[data-testid=output]').textContent)", 20)
    output = page.text_content("[data-testid=output]")
    assert "refused:" in output and "lacks the WebGPU feature shader-f16; use float32" in output, output
    assert "float32 still: 6.0" in output, output
