package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const respTool = `{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`

// TestResponses: POST /v1/responses answers text, reasoning and function
// calls as output items, whole and as its typed event stream, and takes a
// function_call_output back.
func TestResponses(t *testing.T) {
	base := startGatewayWith(t, gwOptions{tools: true}).base
	resp, out := post(t, base+"/v1/responses", "", `{"model":"`+model+`","input":"Say hi","max_output_tokens":4}`)
	var r struct {
		Object, Status string
		Output         []struct {
			Type, Name, Arguments string
			CallID                string `json:"call_id"`
			Content               []struct{ Type, Text string }
		}
		Usage struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		}
		IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	}
	decodeJSON(t, out, &r)
	if resp.StatusCode != 200 || r.Object != "response" || len(r.Output) != 1 || r.Output[0].Type != "message" ||
		r.Output[0].Content[0].Type != "output_text" || r.Usage.Input == 0 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if r.Usage.Output == 4 && (r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens") {
		t.Fatalf("cut by max_output_tokens: %s", out)
	}

	body := `{"model":"` + model + `","instructions":"Be brief.","tools":[` + respTool + `],"input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}]`
	_, out = post(t, base+"/v1/responses", "", body+`}`)
	decodeJSON(t, out, &r)
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "function_call" || r.Output[1].Name != "get_weather" ||
		r.Output[1].Arguments != weatherArgs || r.Output[1].CallID == "" || r.Status != "completed" {
		t.Fatalf("function call: %s", out)
	}
	call := r.Output[1]

	_, stream := post(t, base+"/v1/responses", "", body+`,"stream":true}`)
	var kinds []string
	var args string
	seq := 0
	for _, ev := range strings.Split(strings.TrimSpace(stream), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		var v map[string]any
		decodeJSON(t, data, &v)
		if "event: "+v["type"].(string) != name || v["sequence_number"] != float64(seq) {
			t.Fatalf("event %q", ev)
		}
		seq++
		kinds = append(kinds, v["type"].(string))
		if v["type"] == "response.function_call_arguments.delta" {
			args += v["delta"].(string)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.reasoning_text.delta response.reasoning_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := strings.Join(compact(kinds), " "); got != want || args != weatherArgs {
		t.Fatalf("events %s\nwant   %s\nargs %q", got, want, args)
	}

	items := fmt.Sprintf(`[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":%q,"name":"get_weather","arguments":%q},{"type":"function_call_output","call_id":%q,"output":"sunny"}]`,
		call.CallID, call.Arguments, call.CallID)
	_, out = post(t, base+"/v1/responses", "", `{"model":"`+model+`","tools":[`+respTool+`],"reasoning":{"effort":"none"},"input":`+items+`}`)
	decodeJSON(t, out, &r)
	if len(r.Output) != 1 || r.Output[0].Content[0].Text != "The tool answered: sunny" {
		t.Fatalf("answer: %s", out)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"model":"` + model + `","input":[{"type":"function_call_output","call_id":"nope","output":"x"}]}`, "input[0].call_id"},
		{`{"model":"` + model + `","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"` + model + `","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"strin"}}}}]}`, "tools[0].parameters.properties.a.type"},
	} {
		resp, out := post(t, base+"/v1/responses", "", bad.body)
		var e struct{ Error struct{ Param string } }
		_ = json.Unmarshal([]byte(out), &e)
		if resp.StatusCode != 400 || e.Error.Param != bad.param {
			t.Errorf("%s: %d %s", bad.body, resp.StatusCode, out)
		}
	}
}

// compact drops repeats of the same event kind in a row (the deltas).
func compact(kinds []string) []string {
	var out []string
	for _, k := range kinds {
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out
}
