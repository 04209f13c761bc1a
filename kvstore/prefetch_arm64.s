#include "textflag.h"

// func prefetch(ps []*entry) uint64
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-32
	MOVD ps_base+0(FP), R0
	MOVD ps_len+8(FP), R1
	CBZ R1, done
loop:
	MOVD.P 8(R0), R2
	PRFM (R2), PLDL1KEEP
	SUB $1, R1, R1
	CBNZ R1, loop
done:
	MOVD ZR, ret+24(FP)
	RET
