package api

// PieceKind says what a Piece of model output is.
type PieceKind uint8

const (
	// PieceText is answer text (OpenAI content, an Anthropic text block).
	PieceText PieceKind = iota
	// PieceReasoning is the model's thinking (OpenAI reasoning_content, an
	// Anthropic thinking block).
	PieceReasoning
	// PieceToolCall is part of a tool call: its first piece names the
	// function, the next ones carry its arguments' JSON text in order.
	PieceToolCall
)

// Piece is one piece of a model's output as the output parsers split it.
type Piece struct {
	Kind PieceKind
	// Text is the text, the reasoning, or a fragment of a tool call's
	// arguments (the fragments of one call concatenate to a JSON object).
	Text string
	// Index is a tool call's position among the output's calls, from 0.
	Index int
	// Name is set on a tool call's first piece only: the function called.
	Name string
}

// ToolCall is a whole tool call: the function and its arguments' JSON.
type ToolCall struct {
	Name, Arguments string
}

// Collect gathers pieces into the whole output: text, reasoning and the
// tool calls in order (a non-streamed response's body).
type Collect struct {
	Text, Reasoning []byte
	Calls           []ToolCall
}

// Add takes the next piece.
func (c *Collect) Add(p Piece) {
	switch p.Kind {
	case PieceText:
		c.Text = append(c.Text, p.Text...)
	case PieceReasoning:
		c.Reasoning = append(c.Reasoning, p.Text...)
	case PieceToolCall:
		if p.Name != "" || len(c.Calls) == 0 {
			c.Calls = append(c.Calls, ToolCall{Name: p.Name})
		}
		c.Calls[len(c.Calls)-1].Arguments += p.Text
	}
}
