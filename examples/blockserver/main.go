//go:build linux

// Command blockserver runs either side of package blockserver (in the
// directory below) over RDS RDMA (the IB transport, for example Soft-RoCE).
//
//	blockserver -listen 10.0.0.2:4000 -file disk.img -create 1048576
//	blockserver -listen 10.0.0.1:4001 -server 10.0.0.2:4000 -ops 1000
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/rdssock"
)

func main() {
	listen := flag.String("listen", "", "local RDS address (ip:port) on an RDMA device")
	server := flag.String("server", "", "server address: run as a client")
	file := flag.String("file", "blocks.img", "file to export (server)")
	create := flag.Int("create", 0, "create the file with this many bytes of seeded data (server)")
	seed := flag.Uint64("seed", 1, "seed of the initial content")
	ops := flag.Int("ops", 1000, "random block reads and writes (client)")
	flag.Parse()

	sock, err := rdssock.Listen(netip.MustParseAddrPort(*listen), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if *server == "" {
		if *create > 0 {
			if err := os.WriteFile(*file, blockserver.Content(*seed, *create), 0o644); err != nil {
				log.Fatal(err)
			}
		}
		f, err := os.OpenFile(*file, os.O_RDWR, 0)
		if err != nil {
			log.Fatal(err)
		}
		s, err := blockserver.NewServer(sock, f, nil)
		if err != nil {
			log.Fatal(err)
		}
		sum, err := s.Serve(ctx)
		if err != nil {
			log.Fatal(err)
		}
		mine, _ := s.FileSum()
		fmt.Printf("client sum %s, file sum %s, stats %+v\n", hex.EncodeToString(sum[:]), hex.EncodeToString(mine[:]), s.Stats())
		return
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := blockserver.Dial(dctx, sock, netip.MustParseAddrPort(*server), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	model := blockserver.Content(*seed, int(cl.Blocks())*cl.BlockSize())
	res, err := blockserver.Workload(ctx, cl, model, *ops, 4, *seed)
	if err != nil {
		log.Fatal(err)
	}
	sum, err := cl.Sum(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d reads, %d writes in %v; sums equal: %v\n", res.Reads, res.Writes, res.Duration, sum == res.Sum)
	cl.Bye(ctx, res.Sum)
}
