// The node kinds and field names of tree-sitter-python that the lint rules
// look at, as small enums, so rules compare integers instead of strings.
// Kinds not listed here map to NodeKind::kOther; the grammar's own type name
// is still available through SyntaxTree::type_name().
#pragma once

#include <cstdint>

namespace gpuleak::lint {

// X(enum name, grammar type name). Anonymous tokens the rules need ("+=",
// "True") are listed too; tree-sitter names them by their text.
#define GPULEAK_LINT_NODE_KINDS(X)                        \
  X(kModule, "module")                                    \
  X(kBlock, "block")                                      \
  X(kExpressionStatement, "expression_statement")         \
  X(kAssignment, "assignment")                            \
  X(kAugmentedAssignment, "augmented_assignment")         \
  X(kNamedExpression, "named_expression")                 \
  X(kCall, "call")                                        \
  X(kArgumentList, "argument_list")                       \
  X(kKeywordArgument, "keyword_argument")                 \
  X(kListSplat, "list_splat")                             \
  X(kDictionarySplat, "dictionary_splat")                 \
  X(kAttribute, "attribute")                              \
  X(kSubscript, "subscript")                              \
  X(kSlice, "slice")                                      \
  X(kIdentifier, "identifier")                            \
  X(kString, "string")                                    \
  X(kConcatenatedString, "concatenated_string")           \
  X(kInteger, "integer")                                  \
  X(kFloat, "float")                                      \
  X(kTrue, "true")                                        \
  X(kFalse, "false")                                      \
  X(kNone, "none")                                        \
  X(kFunctionDefinition, "function_definition")           \
  X(kClassDefinition, "class_definition")                 \
  X(kDecoratedDefinition, "decorated_definition")         \
  X(kDecorator, "decorator")                              \
  X(kParameters, "parameters")                            \
  X(kDefaultParameter, "default_parameter")               \
  X(kTypedParameter, "typed_parameter")                   \
  X(kTypedDefaultParameter, "typed_default_parameter")    \
  X(kListSplatPattern, "list_splat_pattern")              \
  X(kDictionarySplatPattern, "dictionary_splat_pattern")  \
  X(kLambda, "lambda")                                    \
  X(kLambdaParameters, "lambda_parameters")               \
  X(kForStatement, "for_statement")                       \
  X(kWhileStatement, "while_statement")                   \
  X(kIfStatement, "if_statement")                         \
  X(kElifClause, "elif_clause")                           \
  X(kElseClause, "else_clause")                           \
  X(kTryStatement, "try_statement")                       \
  X(kExceptClause, "except_clause")                       \
  X(kExceptGroupClause, "except_group_clause")            \
  X(kFinallyClause, "finally_clause")                     \
  X(kWithStatement, "with_statement")                     \
  X(kWithClause, "with_clause")                           \
  X(kWithItem, "with_item")                               \
  X(kAsPattern, "as_pattern")                             \
  X(kAsPatternTarget, "as_pattern_target")                \
  X(kMatchStatement, "match_statement")                   \
  X(kReturnStatement, "return_statement")                 \
  X(kRaiseStatement, "raise_statement")                   \
  X(kGlobalStatement, "global_statement")                 \
  X(kNonlocalStatement, "nonlocal_statement")             \
  X(kDeleteStatement, "delete_statement")                 \
  X(kImportStatement, "import_statement")                 \
  X(kImportFromStatement, "import_from_statement")        \
  X(kFutureImportStatement, "future_import_statement")    \
  X(kAliasedImport, "aliased_import")                     \
  X(kDottedName, "dotted_name")                           \
  X(kBinaryOperator, "binary_operator")                   \
  X(kUnaryOperator, "unary_operator")                     \
  X(kBooleanOperator, "boolean_operator")                 \
  X(kNotOperator, "not_operator")                         \
  X(kComparisonOperator, "comparison_operator")           \
  X(kConditionalExpression, "conditional_expression")     \
  X(kParenthesizedExpression, "parenthesized_expression") \
  X(kTuple, "tuple")                                      \
  X(kList, "list")                                        \
  X(kSet, "set")                                          \
  X(kDictionary, "dictionary")                            \
  X(kPair, "pair")                                        \
  X(kListComprehension, "list_comprehension")             \
  X(kSetComprehension, "set_comprehension")               \
  X(kDictionaryComprehension, "dictionary_comprehension") \
  X(kGeneratorExpression, "generator_expression")         \
  X(kForInClause, "for_in_clause")                        \
  X(kIfClause, "if_clause")                               \
  X(kPatternList, "pattern_list")                         \
  X(kTuplePattern, "tuple_pattern")                       \
  X(kListPattern, "list_pattern")                         \
  X(kExpressionList, "expression_list")                   \
  X(kYield, "yield")                                      \
  X(kAwait, "await")                                      \
  X(kComment, "comment")                                  \
  X(kError, "ERROR")

// Fields of the grammar the analysis reads (tree-sitter "field names").
#define GPULEAK_LINT_FIELDS(X)      \
  X(kLeft, "left")                  \
  X(kRight, "right")                \
  X(kOperator, "operator")          \
  X(kFunction, "function")          \
  X(kArguments, "arguments")        \
  X(kObject, "object")              \
  X(kAttributeName, "attribute")    \
  X(kValue, "value")                \
  X(kSubscriptIndex, "subscript")   \
  X(kName, "name")                  \
  X(kBody, "body")                  \
  X(kParametersField, "parameters") \
  X(kSuperclasses, "superclasses")  \
  X(kCondition, "condition")        \
  X(kConsequence, "consequence")    \
  X(kAlternative, "alternative")    \
  X(kAlias, "alias")                \
  X(kDefinition, "definition")      \
  X(kModuleName, "module_name")     \
  X(kKey, "key")

enum class NodeKind : std::uint8_t {
  kOther = 0,
#define GPULEAK_LINT_ENUM_ENTRY(name, text) name,
  GPULEAK_LINT_NODE_KINDS(GPULEAK_LINT_ENUM_ENTRY)
#undef GPULEAK_LINT_ENUM_ENTRY
};

enum class Field : std::uint8_t {
  kNone = 0,
#define GPULEAK_LINT_ENUM_ENTRY(name, text) name,
  GPULEAK_LINT_FIELDS(GPULEAK_LINT_ENUM_ENTRY)
#undef GPULEAK_LINT_ENUM_ENTRY
};

}  // namespace gpuleak::lint
