" Syntax of ds4 result buffers (ds://plan, ds://retrieve, ...).
if exists('b:current_syntax')
  finish
endif

syntax match ds4Title /^# .*/
syntax match ds4Section /^## .*/
syntax match ds4Label /^  \%(manifest\|session\|model\|budget\|result\|fallback\|observer\|tokens\|query\|stats\|server\|core\|trusted\|client\|database\|schema\|index\|created\|leaf\|mode\|window\|hard limit\|target\|estimated\|actual\|fixed\|prompt hash\|versions\|counts\|history\|project\|privacy\|provider\|class\|policy\|may see\|withheld\|secrets\|redacted\)\>/
syntax match ds4ManifestId /\<m-[0-9a-f]\{8,}\>/
syntax match ds4Number /\<\d[0-9,]*\%(\.\d\+\)\?\>/
syntax match ds4Warning /\%(warning\|notice\|setting ignored\|fallback\|none sent\):.*$/
syntax match ds4Header /^  \%(score\|group\|kind\|#\|outcome\|scope\|level\)  .*$/

highlight default link ds4Title Title
highlight default link ds4Section Statement
highlight default link ds4Label Identifier
highlight default link ds4ManifestId Constant
highlight default link ds4Number Number
highlight default link ds4Warning WarningMsg
highlight default link ds4Header Underlined

let b:current_syntax = 'ds4'
