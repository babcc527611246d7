package filter

// phase is the Coraza phase in which an interruption happened.
type phase uint8

const (
	phaseRequestHeaders phase = iota + 1
	phaseRequestBody
	phaseResponseHeaders
	phaseResponseBody
)

// String returns the phase's metric label value.
func (p phase) String() string {
	switch p {
	case phaseRequestHeaders:
		return "http_request_headers"
	case phaseRequestBody:
		return "http_request_body"
	case phaseResponseHeaders:
		return "http_response_headers"
	case phaseResponseBody:
		return "http_response_body"
	}
	return "unknown"
}
