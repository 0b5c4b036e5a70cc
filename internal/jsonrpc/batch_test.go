package jsonrpc

import (
	"errors"
	"testing"
)

// A batch over the bound is refused with the member count, before any
// member is decoded (a member that does not decode does not change the
// answer); at the bound it decodes.
func TestDecodeBatchMax(t *testing.T) {
	body := []byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"bad":true},{"jsonrpc":"2.0","method":"b"}]`)
	_, _, batch, err := DecodeBatchMax(body, 2)
	var big *BatchTooLargeError
	if !batch || !errors.As(err, &big) || big.Members != 3 || big.Max != 2 {
		t.Fatalf("3 members over a bound of 2: batch=%v err=%v", batch, err)
	}
	if rpc := big.RPC(); rpc.Code != CodeInvalidRequest || rpc.Message != "a batch has at most 2 members, not 3" {
		t.Errorf("error = %d %q", rpc.Code, rpc.Message)
	}
	msgs, errs, _, err := DecodeBatchMax(body, 3)
	if err != nil || len(msgs) != 3 || errs[1] == nil || msgs[0].Method != "a" {
		t.Fatalf("at the bound: msgs=%v errs=%v err=%v", msgs, errs, err)
	}
}
