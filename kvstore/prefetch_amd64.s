#include "textflag.h"

// func prefetch(ps []*entry) uint64
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ ps_base+0(FP), SI
	MOVQ ps_len+8(FP), CX
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	ADDQ $8, SI
	DECQ CX
	JNZ loop
done:
	MOVQ $0, ret+24(FP)
	RET
