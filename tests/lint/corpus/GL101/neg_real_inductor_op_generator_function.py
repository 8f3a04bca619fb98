# Shape of pytorch/pytorch:torch/_inductor/codegen/rocm/ck_universal_gemm_template.py
# (CKGemmTemplate.gen_ops), shortened. Clean: `generator` is bound to a function of an
# op library, not a GAN generator; the ops collected are kernel descriptions.
import torch
from torch._inductor import config


class CKGemmTemplate:
    def gen_ops(self):
        from ck4inductor.universal_gemm.gen_instances import gen_ops_library

        generator = None
        if self.is_batched:
            generator = gen_batched_gemm_ops_library
        else:
            generator = gen_ops_library
        rops = generator()
        ops = []
        for o in rops:
            kBatches = self._get_kBatch(o)
            for kBatch in kBatches:
                ops.append(InductorROCmOp(op=o, kBatch=kBatch))
        return ops
