module github.com/kvgate/kvgate

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/klauspost/compress v1.20.4
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/text v0.23.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	golang.org/x/sys v0.43.0 // indirect
)
