// json_schema_gbnf.h — GBNF for the JSON texts a JSON Schema accepts.
//
// Every text the grammar allows validates against the schema (the tests
// check samples with Python's jsonschema); not every valid text is allowed:
// objects list their properties in the schema's order, optional ones may be
// left out, no others are written; whitespace is at most a newline and 16
// spaces or tabs between tokens; integers have at most 16 digits, fractions
// 16 and exponents 3.
//
// Supported keywords: type (one or a list), enum, const, properties,
// required, additionalProperties (false, true or a schema; used when an
// object lists no properties), items, prefixItems, minItems, maxItems
// (at most kMaxRepeat), minLength, maxLength, anyOf, oneOf (as anyOf),
// allOf of one schema, $ref to "#", "#/$defs/NAME" or "#/definitions/NAME"
// (recursion allowed), nullable, and minimum 0 (a number without a sign).
// Annotations are ignored: title, description, default, examples, $schema,
// $id, $comment, format (not enforced, as jsonschema does not by default),
// readOnly, writeOnly, deprecated. Any other keyword — pattern, other
// bounds, not, if/then/else, ... — is refused: the grammar could not
// promise it.
#pragma once

#include <string>
#include <string_view>

namespace duet::grammar {

// Throws duet::Error(kConfig) "<what>: ..." for text that is not JSON, a
// schema that is not an object or boolean true, or a keyword outside the
// list above, naming its JSON pointer ("/properties/age/pattern"). The
// texts allowed are `prefix`, the JSON, then `suffix` (tool calls written as
// "<tool_call>\n{...}\n</tool_call>").
std::string json_schema_to_gbnf(std::string_view schema, const std::string& what,
                                const std::string& prefix = "", const std::string& suffix = "");

// Any JSON object: response_format {"type": "json_object"}.
std::string json_object_gbnf();

}  // namespace duet::grammar
