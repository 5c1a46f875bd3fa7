package wire

// The topic, cache key, queue-group and consumer name rules, shared by senders and the decoder.

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// ValidateTopic checks a topic: 1..=255 bytes of UTF-8 with no control
// character (Unicode category Cc: U+0000–U+001F and U+007F–U+009F) and no
// whitespace (the Unicode White_Space property). It returns "" when the topic
// is valid, else the reason, worded as the reference implementation words it.
func ValidateTopic(topic string) string {
	if topic == "" {
		return "topic is empty"
	}
	if len(topic) > MaxTopicLen {
		return "topic longer than 255 bytes"
	}
	if !utf8.ValidString(topic) {
		return "string is not valid UTF-8"
	}
	for _, r := range topic {
		if unicode.Is(unicode.Cc, r) {
			return "topic contains a control character"
		}
		if unicode.Is(unicode.White_Space, r) {
			return "topic contains whitespace"
		}
	}
	return ""
}

// ValidateKey checks a cache key: 1..=1024 bytes, any content. It returns ""
// when the key is valid, else the reason.
func ValidateKey(key []byte) string {
	if len(key) == 0 {
		return "key is empty"
	}
	if len(key) > MaxKeyLen {
		return "key longer than 1024 bytes"
	}
	return ""
}

// ValidateGroup checks a queue-group name: 1..=MaxGroupLen bytes of ASCII
// letters, digits, '-', '_' and '.'. It returns "" when the name is valid,
// else the reason, worded as the reference implementation words it.
func ValidateGroup(group string) string {
	return validateName(group, "group", MaxGroupLen)
}

// ValidateConsumer checks a durable consumer name: 1..=MaxConsumerLen bytes
// of ASCII letters, digits, '-', '_' and '.' (the queue-group rule). It
// returns "" when the name is valid, else the reason, worded as the
// reference implementation words it.
func ValidateConsumer(name string) string {
	return validateName(name, "consumer", MaxConsumerLen)
}

// validateName is the rule queue-group and consumer names share; what
// names the kind of name in the reasons.
func validateName(name, what string, maxLen int) string {
	if name == "" {
		return what + " name is empty"
	}
	if len(name) > maxLen {
		return what + " name longer than " + strconv.Itoa(maxLen) + " bytes"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.'
		if !ok {
			return what + " name holds a character other than A-Z a-z 0-9 - _ ."
		}
	}
	return ""
}
