package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/gateway"
	"github.com/kvgate/kvgate/dataplane/media"
)

// mediaFlags configure images in prompts (dataplane/media): the hosts
// images may be fetched from and the limits of a fetch, and each model's
// image processor.
type mediaFlags struct {
	fetch      media.FetchOptions
	processors map[string]media.Processor
}

// mediaProcessorSyntax is --media-processor's value.
const mediaProcessorSyntax = "MODEL=PROCESSOR[,min-pixels=N][,max-pixels=N][,max-tiles=N] or MODEL=@PATH/preprocessor_config.json"

func (f *mediaFlags) register(fs *flag.FlagSet) {
	f.fetch, f.processors = media.Defaults(), map[string]media.Processor{}
	fs.Func("media-allow-host", "a host image URLs may be fetched from (repeatable; exact name or IP, no port); none: image URLs are refused and images must come inline (data: URLs, base64)", func(v string) error {
		o := media.FetchOptions{AllowHosts: []string{v}, MaxBytes: 1, Timeout: 1, MaxConcurrent: 1}
		if err := o.Validate(); err != nil {
			return err
		}
		f.fetch.AllowHosts = append(f.fetch.AllowHosts, v)
		return nil
	})
	fs.Func("media-max-bytes", fmt.Sprintf("largest image in bytes, fetched or inline (default %d)", media.DefaultMaxBytes), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive number of bytes")
		}
		f.fetch.MaxBytes = n
		return nil
	})
	fs.Func("media-fetch-timeout", fmt.Sprintf("bound on fetching one image URL: dial, headers and body (default %v)", media.DefaultFetchTimeout), func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration")
		}
		f.fetch.Timeout = d
		return nil
	})
	fs.BoolVar(&f.fetch.AllowPrivate, "media-allow-private", false, "let image fetches reach private, loopback, link-local and multicast addresses (checked on the address dialed)")
	fs.Func("media-processor", "a model that takes images and its image processor, "+mediaProcessorSyntax+" (repeatable); processors: "+media.ProcessorNames()+"; options as the checkpoint's preprocessor_config.json sets them", f.addProcessor)
}

// addProcessor parses one --media-processor value.
func (f *mediaFlags) addProcessor(v string) error {
	head, opts, _ := strings.Cut(v, ",")
	model, name, ok := strings.Cut(head, "=")
	if !ok || model == "" || name == "" {
		return fmt.Errorf("want %s", mediaProcessorSyntax)
	}
	if file, ok := strings.CutPrefix(name, "@"); ok {
		return f.processorFromFile(model, file, opts)
	}
	var o media.ProcessorOptions
	for opt := range strings.SplitSeq(opts, ",") {
		if opt == "" {
			continue
		}
		key, val, _ := strings.Cut(opt, "=")
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 {
			return fmt.Errorf("option %q: want key=positive integer", opt)
		}
		switch key {
		case "min-pixels":
			o.MinPixels = n
		case "max-pixels":
			o.MaxPixels = n
		case "max-tiles":
			o.MaxTiles = n
		default:
			return fmt.Errorf("option %q is not min-pixels, max-pixels or max-tiles", key)
		}
	}
	p, err := media.NewProcessor(name, o)
	if err != nil {
		return err
	}
	return f.add(model, p)
}

// processorFromFile reads the processor of a checkpoint's
// preprocessor_config.json, whose values take no overrides.
func (f *mediaFlags) processorFromFile(model, file, opts string) error {
	if opts != "" {
		return fmt.Errorf("options go in %s, not after it", file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	p, err := media.ProcessorFromConfig(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return f.add(model, p)
}

func (f *mediaFlags) add(model string, p media.Processor) error {
	if _, dup := f.processors[model]; dup {
		return fmt.Errorf("model %s has a processor already", model)
	}
	f.processors[model] = p
	return nil
}

// gateway is the gateway's Media; the flags were checked as they were
// parsed, so it cannot fail.
func (f *mediaFlags) gateway() *gateway.Media {
	m := &gateway.Media{Resolver: media.Resolver{MaxBytes: f.fetch.MaxBytes}, Processors: f.processors}
	if len(f.fetch.AllowHosts) > 0 {
		fetcher, err := media.NewFetcher(f.fetch)
		if err != nil {
			panic(err) // unreachable: each value was validated by its flag
		}
		m.Resolver.Fetcher = fetcher
	}
	return m
}
