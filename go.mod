module github.com/kvgate/kvgate

go 1.26

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
