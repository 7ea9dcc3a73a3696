// null_put_server answers etcd's KV.Put after doing the least a member must do for it: append a
// record to a log file and fdatasync it. No Raft, no index, no store; the other KV calls answer
// empty. Its one-client put p50 under etcd's benchmark tool, beside the disk's bare fdatasync, is
// how close to that floor any server on grpc-go can come with this client on this machine
// (scripts/bench/run.ts runs it with put-1c; built by build-benchmark.sh, outside the repository).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"

	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// The log is zero-filled ahead of the records, as the servers' WALs are, so each fdatasync
// flushes data and not a new file size; it wraps around at the end.
const (
	logBytes    = 64 << 20
	recordBytes = 350 // about one put's WAL record (8 B key, 256 B value, headers)
)

type nullKV struct {
	mu     sync.Mutex
	file   *os.File
	offset int64
	rev    int64
	record []byte
}

// header is called with s.mu held.
func (s *nullKV) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: s.rev, RaftTerm: 2}
}

// lockedHeader is the header for the calls that change nothing.
func (s *nullKV) lockedHeader() *pb.ResponseHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header()
}

func (s *nullKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := copy(s.record, r.Key)
	copy(s.record[n:], r.Value)
	if _, err := s.file.WriteAt(s.record, s.offset); err != nil {
		return nil, err
	}
	if err := unix.Fdatasync(int(s.file.Fd())); err != nil {
		return nil, err
	}
	s.offset += recordBytes
	if s.offset+recordBytes > logBytes {
		s.offset = 0
	}
	s.rev++
	return &pb.PutResponse{Header: s.header()}, nil
}

func (s *nullKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: s.lockedHeader()}, nil
}

func (s *nullKV) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return &pb.DeleteRangeResponse{Header: s.lockedHeader()}, nil
}

func (s *nullKV) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return &pb.TxnResponse{Header: s.lockedHeader()}, nil
}

func (s *nullKV) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return &pb.CompactionResponse{Header: s.lockedHeader()}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve gRPC on")
	logPath := flag.String("log", "null-put.log", "the log file (created and zero-filled; the caller removes it)")
	flag.Parse()
	file, err := os.OpenFile(*logPath, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	zero := make([]byte, 1<<20)
	for written := 0; written < logBytes; written += len(zero) {
		if _, err := file.Write(zero); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := file.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	pb.RegisterKVServer(server, &nullKV{file: file, rev: 1, record: make([]byte, recordBytes)})
	// The harness waits for this line and reads the port from it.
	fmt.Printf("ready %s\n", listener.Addr())
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
