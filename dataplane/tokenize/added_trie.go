package tokenize

// addedTrie holds added tokens by their bytes: node 0 is the root, each
// node knows its parent, so the tokens that a text starts with are found
// by walking down as far as the text allows and then back up, longest
// first.
type addedTrie struct {
	nodes []trieNode
}

type trieNode struct {
	parent int32
	edges  []trieEdge    // by byte, in insertion order (few per node)
	tokens []*AddedToken // tokens that end here, in the order given
}

type trieEdge struct {
	b     byte
	child int32
}

// newAddedTrie builds the trie of tokens (given longest first, which
// keeps tokens of equal content in their order).
func newAddedTrie(tokens []*AddedToken) *addedTrie {
	tr := &addedTrie{nodes: []trieNode{{parent: -1}}}
	for _, t := range tokens {
		n := int32(0)
		for i := 0; i < len(t.Content); i++ {
			c := tr.child(n, t.Content[i])
			if c < 0 {
				c = int32(len(tr.nodes))
				tr.nodes = append(tr.nodes, trieNode{parent: n})
				tr.nodes[n].edges = append(tr.nodes[n].edges, trieEdge{t.Content[i], c})
			}
			n = c
		}
		tr.nodes[n].tokens = append(tr.nodes[n].tokens, t)
	}
	return tr
}

func (tr *addedTrie) child(n int32, b byte) int32 {
	for _, e := range tr.nodes[n].edges {
		if e.b == b {
			return e.child
		}
	}
	return -1
}

// deepest returns the node reached by following s from the root.
func (tr *addedTrie) deepest(s string) int32 {
	n := int32(0)
	for i := 0; i < len(s); i++ {
		c := tr.child(n, s[i])
		if c < 0 {
			break
		}
		n = c
	}
	return n
}
