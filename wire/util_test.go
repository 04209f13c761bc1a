package wire

import "runtime"

func runtimeGosched() { runtime.Gosched() }
