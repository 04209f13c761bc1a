module github.com/kvgate/kvgate

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/klauspost/compress v1.20.4
	github.com/sugarme/tokenizer v0.3.0
	github.com/tiktoken-go/tokenizer v0.10.0
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/text v0.25.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.1 // indirect
	github.com/emirpasic/gods v1.18.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/patrickmn/go-cache v2.1.0+incompatible // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v2 v2.15.0 // indirect
	github.com/sugarme/regexpset v0.0.0-20200920021344-4d4ec8eaf93c // indirect
	golang.org/x/sys v0.43.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
