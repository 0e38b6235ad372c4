"""int8 quantization kernels: the first family of service-side interventions."""
